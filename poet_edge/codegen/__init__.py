"""C code generation: a validated schedule + arena plan becomes a self-contained C99 project."""
