"""`cr2`'s commands, one module per group; cr2_cli/main.py registers them on the app."""
