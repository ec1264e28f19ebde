"""Who may do what, and how much: the ACL authorizer (``authorizer``), TLS contexts and
certificate principals (``tls``), the SCRAM credential store (``scram_store``), each
connection's authentication state (``session``), the client quota configs
(``client_quotas``) and the rates measured against them (``throttling``)."""
