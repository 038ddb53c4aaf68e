"""The built-in model plugins. Installed as the package ``tabbench_plugins``; each module is
registered through its own entry point in pyproject.toml, exactly as a third-party plugin would be."""
