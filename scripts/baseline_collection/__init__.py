"""The baseline metrics collector's operator entry points.

``main.py`` runs workloads, compares runs and uploads summaries;
``mcp_client.py`` is the measuring protocol client. Both drive the installed
package :mod:`exai.baseline`, where the implementation lives.
"""
