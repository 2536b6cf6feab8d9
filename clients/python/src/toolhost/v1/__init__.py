"""Generated toolhost.v1 messages and stubs (from proto/toolhost/v1; regenerate with `make generate`)."""
