from poet_edge.cli import entry

entry()
