"""`cr2`'s commands, one module per command or command group, named after it; cr2_cli/main.py registers them
on the app."""
