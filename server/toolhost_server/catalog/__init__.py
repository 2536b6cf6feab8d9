"""Where tool definitions come from: Python classes, packaged definitions and YAML catalog directories."""
