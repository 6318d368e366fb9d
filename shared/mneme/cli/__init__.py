"""The `mneme` command line: `mneme --help` lists the commands, `mneme COMMAND --help` shows examples.

Modules: `app` (the parser and `main`), `command` (a command's `Context`, the shared options, `command` and
`group`), `config` (flags > env > config file), `output` (JSON, progress), `server` (serve, mcp), `maintenance`
(config, openapi, and the registration of `consolidate`, `portability` (export, import), `backup` and `status`
(status, reindex)), `memory` (remember, recall, retrieve), `records`, `curate` (scopes, layers, memories, keys).
"""

from mneme.cli.app import main, parser
from mneme.cli.config import DEFAULT_TENANT
from mneme.cli.server import ensure_first_run

__all__ = ["DEFAULT_TENANT", "ensure_first_run", "main", "parser"]
