"""The sections of docs/results.md, rendered: one module per section (the page order and the reads are
cr2_cli.resultsdoc's, which has a module of the same name per section).

Pure: each module's `render(data, words) -> str` takes a small frozen dataclass of frames and values already read
from the warehouses (and what the library computed from them) and returns the section's markdown — headings, prose
and tables (every table a cr2.report table object or cr2.report.markdown's writer, every number through
cr2.report.cells). A verdict word reaches the text only through `words` (words.Words: plain here; the results page
passes cr2_cli.resultsdoc.core.Doc, which marks each word so that a typed one is found).

words            the verdict words, the missing-warehouse line and the label kind every section uses
header           the title and the warehouses the page reads
equal_risk       every router certified under the same rules, and which router to deploy
intervals        savings vs KNN with their intervals and seed spread (scenario: what it shares with the next two)
level            the level of the equal-risk test (A/A)
default_scenario the paper's protocol, paper beside ours
measured         the measured scenario (MMLU-Pro)
risks            what α bounds, validity over re-splits and the price of each rule
premise          the premise map
pools            CR² across measured pools and the label diagnostics
router_study     the router study
zeroeval         the ZeroEval ladders
simcheck         the sim-to-real check
machine          fits and the machine
"""
