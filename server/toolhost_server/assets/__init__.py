"""The asset inventory: machines the asset tools count, search and connect to (AssetService, `toolhost assets`)."""
