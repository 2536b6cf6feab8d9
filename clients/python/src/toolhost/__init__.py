"""Python client for toolhost."""
