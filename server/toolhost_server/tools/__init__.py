"""Built-in tools. Every concrete Tool subclass in a module of this package is served; packaged YAML
definitions (tools that run a program) live in `definitions/`."""
