"""The console: a web page where a person opens, reads and continues what exai did.

Served by the HTTP face under ``/console`` (docs/console.md): a person signs in
with their exai token or JWT and sees only their own threads, jobs, memories
and spend; an operator also sees everyone's spend, the audit trail, the
daemon's health and its settings. Agent sessions (what agents sent to exai as
their model) are threads too, read as transcripts and continued in a fork.
Pages are rendered on the server (Jinja2) with one small script; reads go
through :class:`exai.port.Reads`, every change is a tool call through the
core's port.

- :mod:`.app`: the :class:`Console` (routes, templates, forms, security headers)
- :mod:`.sessions`: sign-in sessions, cookies and CSRF tokens (pure)
- :mod:`.markdown`: untrusted text rendered and sanitized (pure)
- :mod:`.charts`: the spend charts as inline SVG (pure)
- :mod:`.transcript`: a thread's messages as turns, tool calls tied to their results (pure)
- :mod:`.views`: times, amounts, agent session labels, forms into tool arguments (pure)
- :mod:`.signin`, :mod:`.threads`, :mod:`.jobs`, :mod:`.memories`, :mod:`.spend`,
  :mod:`.operator`, :mod:`.keys`, :mod:`.request_log`, :mod:`.usage`: the pages
- :mod:`.pages`: every route, the console's and its pages', put together
"""

from exai.web.console.app import PREFIX, Console

__all__ = ["PREFIX", "Console"]
