"""shrinkgpu for coding agents: ``shrinkgpu mcp``, an MCP server whose tools mirror the
commands (server.py, the one module that imports the ``mcp`` SDK) and run them as child
processes (calls.py).  Nothing here is imported by the CLI's other commands or by a
reduction: the SDK is an optional extra (``pip install 'shrinkgpu[agents]'``)."""
