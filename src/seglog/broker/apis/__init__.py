"""The API handlers, one module per API family, and ``registry``: the one table of API key
-> schemas, versions, handler and flags. Every handler is ``handler(ctx, rctx, request)``."""
