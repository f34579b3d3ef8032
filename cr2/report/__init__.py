"""Reports: cr2's results as self-contained HTML pages, LaTeX and markdown tables.

Pure: pandas frames (the rows of the warehouse views) in, PNG bytes and strings out.

page        the shell every HTML page shares: stylesheet, SIMULATED / MEASURED banner, facts, figures, tables
styles      how each evaluated method is shown (display name, colour, learned, reference)
figures     the evaluation's figures, and the shared matplotlib frame (`axes`, `png`)
cells       how every number, share, interval, p-value and count is written in a table cell
tables      the evaluation's tables; the ones a run shows on several surfaces (mean saving, fixed-accuracy savings,
            router complexity, the operating points, drift and re-calibration) as objects, one set of cells
latex       a table as booktabs LaTeX
markdown    the one markdown table writer
evaluation  the evaluation page (one run's §VII figures and tables)
premise     the premise page (where CR² pays: the speed × channel map)
simcheck    the sim-to-real check's page, and its tables on docs/results.md

Tables as objects (`table.Table`: built once from stored frames, rendered as markdown, rich, a Prefect artifact or
HTML; verdict words through the caller's `word`), one module per kind of result, shared by docs/results.md
(cr2_cli.resultsdoc) and the commands that print the same table:
table       the Table base and the row filter every table uses
pools       the measured-pool sweep, the ZeroEval ladders and the label diagnostics (`cr2 study pools|diagnostics`)
level       the level of the equal-risk test (`cr2 study level`)
router_study the router study (`cr2 study routers`)
premise_map the premise map (`cr2 study premise`)
equal_risk  the equal-risk comparisons of one scenario, over its seeds
intervals   savings vs KNN with their intervals and seed spread
measured    the measured scenario's run
risks       the risks each rule bounds and the price of each rule

resultsdoc  the sections of docs/results.md, rendered from the frames cr2_cli.resultsdoc reads (one module per
            section: prose, headings and the tables above; no statistics)
"""
