"""Reports: cr2's results as self-contained HTML pages, LaTeX and markdown tables.

Pure: pandas frames (the rows of the warehouse views) in, PNG bytes and strings out.

page        the shell every HTML page shares: stylesheet, SIMULATED / MEASURED banner, facts, figures, tables
styles      how each evaluated method is shown (display name, colour, learned, reference)
figures     the evaluation's figures, and the shared matplotlib frame (`axes`, `png`)
cells       how every number, share, interval, p-value and count is written in a table cell
tables      the evaluation's tables and the mean-saving table
latex       a table as booktabs LaTeX
markdown    the one markdown table writer
evaluation  the evaluation page (one run's §VII figures and tables)
premise     the premise page (where CR² pays: the speed × channel map)
simcheck    the sim-to-real check's page
"""
