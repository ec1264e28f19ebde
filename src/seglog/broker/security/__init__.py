"""Who may do what: the ACL authorizer (``authorizer``), TLS contexts and certificate
principals (``tls``), the SCRAM credential store (``scram_store``), and each connection's
authentication state (``session``)."""
