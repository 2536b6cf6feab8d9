"""The server looking at itself (what it serves, its parts, settings and databases), for the introspection tools."""
