# `flow_modules` is where aiflows keeps flow modules (FlowVerse syncs them into `<project>/flow_modules/<user>/`).
# Extending __path__ lets this installed package and a project's own `flow_modules/` folder share the name.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)
