"""Mneme's memory as MCP tools (`mneme mcp`, stdio): the server and its curation tools (`server`), the tools
over episodes and facts as records (`records`), and the tool parameters built from the operations' request
models (`params`)."""
