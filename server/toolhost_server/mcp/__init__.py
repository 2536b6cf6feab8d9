"""toolhost over the Model Context Protocol: /mcp on the HTTP listener and `toolhost mcp` on stdio, both in
front of the one call pipeline. Only this package imports the MCP SDK, as only api/ imports grpc."""
