"""The gRPC surface: the only package that imports grpc or generated code. It translates, nothing more."""
