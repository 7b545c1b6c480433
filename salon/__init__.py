"""The agent-salon project: settings, the command line, serving."""

# The one place the version is written (pyproject.toml reads it): `salon --version`, and
# the settings key a running server compares (salon.config.settings_key).
__version__ = "0.1.0"
