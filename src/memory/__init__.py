"""Long-term memory: what a principal established once, recalled in later conversations.

* :mod:`exai.memory.base`: what a memory is and the storage contract;
* :mod:`exai.memory.sqlite`, :mod:`exai.memory.postgres`: the two backends;
* :mod:`exai.memory.ranking`: hybrid ranking and dedup decisions (pure);
* :mod:`exai.memory.block`: the block injected into a new thread (pure);
* :mod:`exai.memory.embeddings`, :mod:`exai.memory.embedders`: embedding plugins;
* :mod:`exai.memory.service`: what tools, the command line and injection call;
* :mod:`exai.memory.extraction`: the optional background extraction worker.
"""

from exai.memory.backends import memory_url, open_memory, open_memory_store
from exai.memory.base import MEMORY_TYPES, Memory, MemoryNotFoundError, MemoryStore
from exai.memory.service import MemoryConfig, MemoryService, Remembered

__all__ = [
    "MEMORY_TYPES",
    "Memory",
    "MemoryConfig",
    "MemoryNotFoundError",
    "MemoryService",
    "MemoryStore",
    "Remembered",
    "memory_url",
    "open_memory",
    "open_memory_store",
]
