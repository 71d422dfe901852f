"""`liveplex check`: the GPT-Live conformance checker (gpt-live §12.4, §14); see docs/check.md.

The package imports no submodule itself: `liveplex check --help` parses on the core install, and
the checks (the `check` extra: the official SDK's models, jsonschema) load once it runs.
"""
