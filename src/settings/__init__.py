"""Every setting exai reads, as one typed object.

Values come from the environment, then from ``.env`` in the working directory,
then from the user's file ``~/.config/exai/env`` (``$XDG_CONFIG_HOME/exai/env``),
the first that sets a variable winning (the files are read through python-dotenv
by pydantic-settings). Names are ``EXAI_*`` except
the provider and Supabase credentials, which keep the names their vendors use.
``.env.example`` documents each one; ``exai config`` prints the effective values
with secrets masked. An invalid value stops start-up with :class:`SettingsError`,
which names the variable and the problem.

One module per section of ``.env.example`` (``daemon``, ``tools``,
``providers``, ``conversations``, ``audit``, ``shim``, ``memory``, ``jobs``)
declares its settings; :mod:`~exai.settings.model` joins them into
:class:`Settings`; :mod:`~exai.settings.values` parses the values that are small
languages (budgets, memory type weights, the token list); :mod:`~exai.settings.env`
loads them and writes ``.env.example``, :mod:`~exai.settings.reference` writes
``docs/settings.md``; :mod:`~exai.settings.sources` says where each value came from
and which variables look meant for exai but are ignored. Settings carry plain data
and import nothing of exai's but :mod:`exai.redact`.
"""

from __future__ import annotations

from exai.settings.env import SettingsError, env_example, load_settings
from exai.settings.fields import env_files, user_env_file
from exai.settings.model import Settings, env_name
from exai.settings.reference import settings_reference
from exai.settings.sources import changed, misspelt, read_sources

__all__ = [
    "Settings",
    "SettingsError",
    "changed",
    "env_example",
    "env_files",
    "env_name",
    "load_settings",
    "misspelt",
    "read_sources",
    "settings_reference",
    "user_env_file",
]
