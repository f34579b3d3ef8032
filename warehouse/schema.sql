-- cr2 warehouse schema. Bump SCHEMA_VERSION in warehouse/db.py whenever this file changes a table.
-- Tables are filled by the pipeline's stages: ingest → label → prepare → train → calibrate → evaluate.

CREATE TABLE IF NOT EXISTS meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);

-- ingest: one row per benchmark question (real public benchmark text)
CREATE TABLE IF NOT EXISTS queries (
    query_id      VARCHAR PRIMARY KEY,   -- mmlu/<subject>/<i>, bbh/<task>/<i>, gpqa/<subset>/<i>, mbpp/<task_id>
    benchmark     VARCHAR NOT NULL,      -- mmlu | bbh | gpqa | mbpp
    subset        VARCHAR NOT NULL,      -- MMLU subject, BBH task, GPQA subset, MBPP split
    question      VARCHAR NOT NULL,
    choices       VARCHAR[],             -- 4 options A–D for multiple choice, NULL otherwise
    target        VARCHAR,               -- letter (MC), exact string (BBH), reference code (MBPP); NULL: no gold
                                         -- answer (catalogue `target: optional`, imported labels; schema 4)
    tests         VARCHAR[],             -- MBPP assert lines, NULL otherwise
    test_setup    VARCHAR,               -- MBPP test_setup_code
    prompt_tokens INTEGER NOT NULL,      -- L_in(x) under `tokenizer`
    tokenizer     VARCHAR NOT NULL,      -- name of the tokenizer that counted prompt_tokens
    content_hash  VARCHAR NOT NULL       -- sha256 of the query's text fields (incremental re-embedding)
);

CREATE TABLE IF NOT EXISTS models (
    model_id  VARCHAR PRIMARY KEY,
    hf_name   VARCHAR NOT NULL,
    params    DOUBLE NOT NULL,           -- parameter count N_m
    platform  VARCHAR NOT NULL,
    role      VARCHAR NOT NULL,          -- device | edge
    position  INTEGER NOT NULL           -- order in the pool (0 = device model)
);

-- labeling: per-query correctness y_m(x), by source (simulated-irt-v1, lm-eval, an imported name)
CREATE TABLE IF NOT EXISTS label_runs (
    run_id           VARCHAR PRIMARY KEY,
    source           VARCHAR NOT NULL,
    model_id         VARCHAR NOT NULL,
    revision         VARCHAR,
    backend          VARCHAR NOT NULL,   -- simulator | hf | vllm | api | import
    backend_args     VARCHAR,            -- JSON
    lm_eval_version  VARCHAR,
    task_config_hash VARCHAR,
    started_at       TIMESTAMP NOT NULL,
    finished_at      TIMESTAMP,
    status           VARCHAR NOT NULL,   -- running | finished | failed
    done             INTEGER NOT NULL,
    total            INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS labels (
    source        VARCHAR NOT NULL,
    query_id      VARCHAR NOT NULL,
    model_id      VARCHAR NOT NULL,
    correct       BOOLEAN NOT NULL,
    output_tokens INTEGER,               -- L_out,m(x) as generated; NULL when not recorded
    run_id        VARCHAR NOT NULL,
    PRIMARY KEY (source, query_id, model_id)
);

-- prepare: splits, embeddings, channel states and costs
CREATE TABLE IF NOT EXISTS splits (
    query_id  VARCHAR NOT NULL,
    seed      INTEGER NOT NULL,
    split     VARCHAR NOT NULL,          -- train | dev | val | test (dev ⊂ original train share)
    stratum   VARCHAR NOT NULL,
    PRIMARY KEY (seed, query_id)
);

CREATE TABLE IF NOT EXISTS embeddings (
    query_id     VARCHAR NOT NULL,
    encoder      VARCHAR NOT NULL,
    content_hash VARCHAR NOT NULL,       -- the query's content_hash when embedded
    vector       FLOAT[384] NOT NULL,    -- L2-normalised
    PRIMARY KEY (encoder, query_id)
);

CREATE TABLE IF NOT EXISTS state_distributions (
    dist_id     VARCHAR PRIMARY KEY,     -- name@vN-<hash>
    name        VARCHAR NOT NULL,
    version     INTEGER NOT NULL,
    spec        VARCHAR NOT NULL,        -- JSON of the distribution
    created_at  TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS states (
    dist_id      VARCHAR NOT NULL,
    query_id     VARCHAR NOT NULL,
    draw         INTEGER NOT NULL,
    distance_m   DOUBLE NOT NULL,
    fading_ul    DOUBLE NOT NULL,        -- |z_ul|^2
    fading_dl    DOUBLE NOT NULL,        -- |z_dl|^2
    gain_ul      DOUBLE NOT NULL,        -- g_ul, linear
    gain_dl      DOUBLE NOT NULL,
    rate_ul_bps  DOUBLE NOT NULL,
    rate_dl_bps  DOUBLE NOT NULL,
    PRIMARY KEY (dist_id, query_id, draw)
);

CREATE TABLE IF NOT EXISTS costs (
    dist_id      VARCHAR NOT NULL,
    label_source VARCHAR NOT NULL,       -- L_out comes from this source's output_tokens
    split_seed   INTEGER NOT NULL,       -- the splits (seed) whose train rows gave L̂_out (and T0/E0 under reference)
    query_id     VARCHAR NOT NULL,
    draw         INTEGER NOT NULL,
    model_id     VARCHAR NOT NULL,
    latency_s    DOUBLE NOT NULL,
    energy_j     DOUBLE NOT NULL,
    cost_raw     DOUBLE NOT NULL,        -- c̄_m
    cost_norm    DOUBLE NOT NULL,        -- c_m = c̄_m / c̄_ref, realised (L_out as the model wrote it): accounting
    cost_est_norm DOUBLE NOT NULL,       -- ĉ_m with the pre-execution estimate L̂_out (train mean per benchmark, model): routing
    PRIMARY KEY (dist_id, label_source, split_seed, query_id, draw, model_id)
);

-- train / calibrate: fitted artefacts and the threshold table (the deployed artefact)
CREATE TABLE IF NOT EXISTS artifacts (
    kind         VARCHAR NOT NULL,       -- teacher | gate | router:<name>
    fingerprint  VARCHAR NOT NULL,
    path         VARCHAR NOT NULL,
    label_source VARCHAR NOT NULL,
    params       BIGINT,
    flops        BIGINT,
    fit_seconds  DOUBLE,
    meta         VARCHAR,                -- JSON
    created_at   TIMESTAMP NOT NULL,
    PRIMARY KEY (kind, fingerprint)
);

CREATE TABLE IF NOT EXISTS thresholds (
    version          INTEGER NOT NULL,
    dist_id          VARCHAR NOT NULL,
    label_source     VARCHAR NOT NULL,
    gate_fingerprint VARCHAR NOT NULL,
    lam              DOUBLE NOT NULL,
    alpha            DOUBLE NOT NULL,
    tau              DOUBLE NOT NULL,    -- τ*(λ; α); +inf: accept nothing, -inf: accept all
    n_calib          INTEGER NOT NULL,
    rule             VARCHAR NOT NULL,   -- crc | empirical | ltt (docs/guarantees.md)
    score_dtype      VARCHAR NOT NULL,   -- dtype the scores were calibrated in (τ* is exact in it)
    created_at       TIMESTAMP NOT NULL,
    delta            DOUBLE,             -- ltt: P(some λ of the version has risk > α) ≤ δ, per α; NULL otherwise
    "group"          VARCHAR NOT NULL DEFAULT '',  -- Mondrian: 'attribute=value' (e.g. 'benchmark=gpqa'); '' pooled
    router           VARCHAR NOT NULL DEFAULT 'cr2',  -- the router it deploys: 'cr2', or a certified '<router>@<rule>' (cr2.routers.certify)
    PRIMARY KEY (version, lam, alpha, "group")
);

-- guarantees: does each calibration rule keep its promise, and what does it cost? (cr2 guarantees; view v_guarantees)
CREATE TABLE IF NOT EXISTS guarantees (
    run_id       VARCHAR NOT NULL,       -- one validity run (n_resplits random calibration/test re-splits)
    source       VARCHAR NOT NULL,       -- where the pool came from: 'warehouse val+test' or 'synthetic'
    label_source VARCHAR NOT NULL,
    check_name   VARCHAR NOT NULL,       -- crc_mean_risk | ltt_any_violation | mondrian_mean_risk | target_miss | price | …
    rule         VARCHAR NOT NULL,       -- crc | ltt | mondrian-crc | target-accuracy | target-budget | …-crc-oracle
    metric       VARCHAR NOT NULL,       -- mean_test_risk | share_any_lam_over_alpha_pool | local_rate | mean_cost | …
    lam          DOUBLE,
    alpha        DOUBLE,
    "group"      VARCHAR,
    delta        DOUBLE,
    target       DOUBLE,                 -- accuracy target or cost budget (target mode)
    value        DOUBLE NOT NULL,
    se           DOUBLE,                 -- Monte-Carlo standard error over the re-splits
    bound        DOUBLE,                 -- what the rule promises value ≤ bound (α or δ); NULL for prices
    n_resplits   INTEGER NOT NULL,
    n_calib      INTEGER NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    seed         BIGINT,                 -- the seed of the row's re-split stream: `cr2 guarantees --seed` reproduces it
    stage        VARCHAR                 -- screening | confirmatory (a flagged family re-checked on its own stream);
                                         -- NULL: a run stored before schema 9 (screening)
);

-- evaluate: tidy results
CREATE TABLE IF NOT EXISTS eval_runs (
    run_id        VARCHAR PRIMARY KEY,
    config_hash   VARCHAR NOT NULL,
    label_source  VARCHAR NOT NULL,
    dist_id       VARCHAR NOT NULL,
    threshold_version INTEGER,
    decision_cost VARCHAR NOT NULL,          -- estimated (pre-execution ĉ, the paper's protocol) | realised
    split_seed    INTEGER,                   -- the splits (and costs) the run used; NULL for runs before schema 5
    code_version  VARCHAR NOT NULL,
    created_at    TIMESTAMP NOT NULL,
    default_alpha DOUBLE                     -- grids.default_alpha: the one α a method swept over α is compared at
);

CREATE TABLE IF NOT EXISTS predictions (
    router       VARCHAR NOT NULL,
    fingerprint  VARCHAR NOT NULL,
    query_id     VARCHAR NOT NULL,
    model_id     VARCHAR NOT NULL,
    p_hat        DOUBLE NOT NULL,        -- predicted P(correct)
    PRIMARY KEY (router, fingerprint, query_id, model_id)
);

CREATE TABLE IF NOT EXISTS decisions (
    run_id         VARCHAR NOT NULL,
    method         VARCHAR NOT NULL,
    lam            DOUBLE NOT NULL,
    alpha          DOUBLE,               -- NULL for methods without calibration
    query_id       VARCHAR NOT NULL,
    chosen_model   VARCHAR NOT NULL,
    accepted_local BOOLEAN NOT NULL,
    gate_accept    BOOLEAN               -- the gate's own acceptance 1[s ≥ τ*] (CR² and its variants; NULL otherwise):
                                         -- the event the false-acceptance risk counts
);
-- added after schema version 3 (additive: older warehouses gain the column, NULL for their runs)
ALTER TABLE decisions ADD COLUMN IF NOT EXISTS gate_accept BOOLEAN;

CREATE TABLE IF NOT EXISTS metrics (
    run_id     VARCHAR NOT NULL,
    method     VARCHAR NOT NULL,
    lam        DOUBLE,
    alpha      DOUBLE,
    benchmark  VARCHAR NOT NULL,         -- a benchmark name or 'all'
    metric     VARCHAR NOT NULL,         -- accuracy | cost | risk | local_rate | ...
    value      DOUBLE
);

-- evaluate: what each evaluated method is, from the router catalogue (cr2/routers/catalogue.yaml); views
-- select methods by these properties, never by lists of names
CREATE TABLE IF NOT EXISTS methods (
    run_id      VARCHAR NOT NULL,
    method      VARCHAR NOT NULL,        -- as in metrics.method
    router      VARCHAR NOT NULL,        -- the catalogue entry it comes from
    kind        VARCHAR NOT NULL,        -- cr2 | cr2-rule | cr2-risk-rule | cr2-rate | uncalibrated | cr2-variant | cr2-resplit | ablation | reference | baseline | baseline-variant | certified | uncertified-router | no-device-router
    learned     BOOLEAN NOT NULL,        -- fitted on train (compared at fixed accuracy)
    display     VARCHAR NOT NULL,        -- name in figures and tables
    colour      VARCHAR NOT NULL,        -- colour in figures
    reference   BOOLEAN NOT NULL,        -- the baseline savings are measured against (KNN)
    sort_order  INTEGER NOT NULL,
    PRIMARY KEY (run_id, method)
);

-- the sim-to-real check (cr2 simcheck): measured vs simulated labels on MMLU-Pro, tidy, one row per
-- (run, label source, simulator seed, statistic, model pair, λ, target); source 'measured' has seed NULL
CREATE TABLE IF NOT EXISTS simcheck (
    run_id     VARCHAR NOT NULL,
    source     VARCHAR NOT NULL,         -- measured | simulated-irt-v2 | simulated-irt-v1 | fit
    seed       INTEGER,                  -- simulator seed (NULL for measured labels)
    section    VARCHAR NOT NULL,         -- structure | routing | fit
    statistic  VARCHAR NOT NULL,         -- solvable_share, accuracy, correlation, p_device_given_wrong, saving_vs_knn_pct, risk, ...
    model      VARCHAR NOT NULL,         -- a model id, a router name, or ''
    other      VARCHAR NOT NULL,         -- the second model of a pair, or ''
    lam        DOUBLE,                   -- λ of a routing point
    target     DOUBLE,                   -- target accuracy of a fixed-accuracy saving
    value      DOUBLE
);

CREATE TABLE IF NOT EXISTS simcheck_runs (
    run_id       VARCHAR PRIMARY KEY,
    n_questions  INTEGER NOT NULL,       -- questions the check used (a stable subsample unless --full)
    shape        VARCHAR NOT NULL,       -- JSON: the v2 shape simulated, and the fresh fit beside it
    pool         VARCHAR NOT NULL,       -- JSON: model ids → measured names
    created_at   TIMESTAMP NOT NULL
);

-- evaluate: paired bootstrap intervals over the test queries of one evaluation run, tidy. One
-- resample index (seed, n_resamples) shared by every method. metric: a per-query metric of the metrics table
-- (accuracy | cost | local_rate | risk | risk_all | …) at (method, λ, α, benchmark), or a learned method's
-- saving_vs_knn_pct at `target` / mean_saving_vs_knn_pct over the n_targets targets of the validation grid
CREATE TABLE IF NOT EXISTS intervals (
    run_id      VARCHAR NOT NULL,
    method      VARCHAR NOT NULL,
    lam         DOUBLE,                  -- NULL for savings (over the whole λ sweep)
    alpha       DOUBLE,
    benchmark   VARCHAR NOT NULL,        -- a benchmark name or 'all'
    metric      VARCHAR NOT NULL,
    target      DOUBLE,                  -- target accuracy of a saving row, NULL otherwise
    estimate    DOUBLE,                  -- the statistic on the full test set (= the metrics table / v_fixed_accuracy)
    lower       DOUBLE,                  -- percentile interval at `level` (cr2.evaluation.statistics.tail_rank)
    upper       DOUBLE,
    level       DOUBLE NOT NULL,
    n_resamples INTEGER NOT NULL,        -- resamples the interval rests on: all of them for a saving (fallback cost)
    n_targets   INTEGER,                 -- mean saving: the size of the validation target grid it averages over
    seed        INTEGER NOT NULL,        -- evaluation.bootstrap.seed of the shared index
    p_value     DOUBLE,                  -- two-sided bootstrap p of "the statistic is 0", from the same resamples
    family      VARCHAR,                 -- a test's family within the run (cr2.evaluation.families); NULL: an estimate
    family_size INTEGER,                 -- the tests of that family with a finite p
    p_holm      DOUBLE,                  -- Holm-adjusted p over the family
    verdict     VARCHAR                  -- the one word of the test: cheaper | dearer | larger | smaller | no difference detected
);

-- cr2 run's equal-risk stage (cr2.evaluation.equal_risk): every certified router's cost at fixed accuracy with risk ≤ α, and
-- CR² against each baseline in three questions — gate-quality (uncertified vs uncertified), guarantee-price
-- (a router certified vs itself uncertified), certified-score (certified vs certified, same rule and α) — as paired
-- bootstrap savings over the test queries on the evaluation's shared index
CREATE TABLE IF NOT EXISTS equal_risk (
    run_id      VARCHAR NOT NULL,        -- the evaluation run whose decisions the sides are
    question    VARCHAR NOT NULL,        -- cost | gate-quality | calibrated-vs-default | certified-score | deploy
    router      VARCHAR NOT NULL,        -- the router of side a ('always-edge': the deploy rule's router-less candidate)
    against     VARCHAR,                 -- the baseline of side b, 'uncertified' (guarantee-price), NULL for cost
    rule        VARCHAR,                 -- the calibration rule of the certified side(s); NULL for gate-quality
    alpha       DOUBLE,                  -- the risk level α of the certified side(s)
    method_a    VARCHAR NOT NULL,        -- side a's method (e.g. cr2@crc-avoidable, knn@uncertified, cr2-fixed-0.5)
    method_b    VARCHAR,                 -- side b's method; NULL for cost
    metric      VARCHAR NOT NULL,        -- cost_at_accuracy | saving_pct (a's saving vs b, %) | mean_saving_pct |
                                         -- deploy: geo_mean_cost | geo_mean_saving_pct | noninferiority_loss_pct
    target      DOUBLE,                  -- target accuracy; NULL for the mean over the validation target grid
    estimate    DOUBLE,
    lower       DOUBLE,                  -- percentile interval at `level` over every resample
    upper       DOUBLE,
    level       DOUBLE NOT NULL,
    n_resamples INTEGER NOT NULL,
    n_targets   INTEGER,                 -- mean saving: the validation grid's targets it averages over (those kept)
    p_value     DOUBLE,                  -- two-sided bootstrap p of "saving = 0", from the interval's own resamples
    p_holm      DOUBLE,                  -- Holm-adjusted over its family (cr2.evaluation.families.equal_risk_family)
    verdict     VARCHAR,                 -- the one word of the test (from the interval and the Holm p)
    seed        INTEGER NOT NULL,        -- evaluation.bootstrap.seed of the shared index
    family      VARCHAR,                 -- the test's family within the run: question/rule/alpha/(mean | per-target), deploy/…
    family_size INTEGER,                 -- the tests of that family with a finite p
    dropped_targets VARCHAR              -- mean saving: the grid targets left out (no Always-model reaches them on
                                         -- test) and why; NULL where none was (FallbackCost.reachable_grid)
);

-- cr2 run's equal-risk stage, the deploy rule (cr2.evaluation.deploy, docs/guarantees.md "Which router to deploy"): one
-- answer per rule at the default α — deploy a router, "no device", or "undecided" — read by every surface
CREATE TABLE IF NOT EXISTS deploy_decisions (
    run_id           VARCHAR NOT NULL,   -- the evaluation run
    rule             VARCHAR NOT NULL,   -- the calibration rule of the certified candidates
    alpha            DOUBLE NOT NULL,    -- the default α they are certified at
    answer           VARCHAR NOT NULL,   -- deploy | no device | undecided
    recommended      VARCHAR NOT NULL,   -- the candidate recommended (undecided: the one the others could not be told from)
    undecided_with   VARCHAR NOT NULL,   -- comma-separated simpler candidates neither out nor shown non-inferior ('' unless undecided)
    cheapest         VARCHAR NOT NULL,   -- the candidate with the lowest estimated geometric-mean cost among those not out
    margin_pct       DOUBLE NOT NULL,    -- Δ, the non-inferiority margin, %
    rule_sha         VARCHAR NOT NULL,   -- sha256[:16] of the rule's text (cr2.evaluation.deploy.RULE_TEXT)
    n_pairs          INTEGER NOT NULL,   -- the pairwise family's size (Holm)
    n_noninferiority INTEGER NOT NULL    -- the non-inferiority family's size (Holm)
);

-- every candidate of the deploy rule with the whole cost of its decisions and its status in the decision
CREATE TABLE IF NOT EXISTS deploy_candidates (
    run_id              VARCHAR NOT NULL,
    rule                VARCHAR NOT NULL,
    alpha               DOUBLE NOT NULL,
    candidate           VARCHAR NOT NULL, -- <router>@<rule>, <router>@no-device or always-edge
    router              VARCHAR,          -- its catalogue router; NULL for always-edge
    device              BOOLEAN NOT NULL, -- runs a device model
    runs_router         BOOLEAN NOT NULL, -- runs the shared embedding and a router head
    flops_device        BIGINT NOT NULL,  -- decision FLOPs on the device per query (shared embedding excluded)
    flops_edge          BIGINT NOT NULL,  -- decision FLOPs per deferred query (CR²: its teacher)
    flops_worst         BIGINT NOT NULL,  -- flops_device + flops_edge: the figure the rule ranks by
    flops_expected      DOUBLE NOT NULL,  -- flops_device + defer_share · flops_edge
    defer_share         DOUBLE,           -- share of test queries deferred, mean over the λ sweep
    params              BIGINT,           -- parameters the router holds
    stored_bytes        BIGINT,           -- size of its stored fitted files: what a deployment loads (a KNN's index too)
    fit_seconds         DOUBLE,           -- its training time as stored with its artefacts
    complexity_rank     INTEGER NOT NULL, -- 1 = simplest (device model, router, flops_worst)
    geo_mean_cost       DOUBLE NOT NULL,  -- geometric mean over the target grid of its cost at the target
    geo_mean_cost_lower DOUBLE NOT NULL,  -- 95 % bootstrap interval
    geo_mean_cost_upper DOUBLE NOT NULL,
    status              VARCHAR NOT NULL, -- out | cheapest | non-inferior | open | not simpler
    out_by              VARCHAR NOT NULL  -- comma-separated candidates it is detectably dearer than
);

-- cr2 study seeds: one row per (study, seed) — which evaluation run the seed produced, and where
CREATE TABLE IF NOT EXISTS seed_runs (
    study_id    VARCHAR NOT NULL,
    seed        INTEGER NOT NULL,        -- split, teacher, gate and learned-baseline seed of this re-run
    run_id      VARCHAR NOT NULL,        -- its evaluation run (in `home`)
    home        VARCHAR NOT NULL,        -- the warehouse it ran in, relative to this one's home ('.' = this one)
    n_test      INTEGER NOT NULL,
    created_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (study_id, seed)
);

-- cr2 study seeds: the headline statistics of each seed's run, tidy (same metric names as `intervals`)
CREATE TABLE IF NOT EXISTS seed_results (
    study_id    VARCHAR NOT NULL,
    seed        INTEGER NOT NULL,
    method      VARCHAR NOT NULL,
    lam         DOUBLE,
    alpha       DOUBLE,
    benchmark   VARCHAR NOT NULL,
    metric      VARCHAR NOT NULL,
    target      DOUBLE,
    value       DOUBLE,
    lower       DOUBLE,                  -- that seed's own bootstrap interval
    upper       DOUBLE
);

-- study premise: the premise map, one row per cell of a device-speed × channel grid
CREATE TABLE IF NOT EXISTS premise_cells (
    study_id        VARCHAR NOT NULL,    -- the base it varies: label source, gate/teacher, baselines, config
    speed_factor    DOUBLE NOT NULL,     -- × the device platform's prefill throughput and memory bandwidth
    channel         VARCHAR NOT NULL,    -- state distribution name (configs/states/)
    dist_id         VARCHAR NOT NULL,
    label_source    VARCHAR NOT NULL,
    mean_distance_m DOUBLE NOT NULL,
    cost_ratio_est  DOUBLE NOT NULL,     -- E[ĉ_0] / E[min edge ĉ_m] over every (query, state): < 1 device cheap
    cost_ratio_realised DOUBLE NOT NULL, -- the same under the realised c
    device_dearer_share_est DOUBLE NOT NULL,  -- share of rows with ĉ_0 > min edge ĉ_m
    n_test          INTEGER NOT NULL,
    n_evaluable     INTEGER NOT NULL,    -- test queries some model solves (accuracy, cost, local rate)
    n_resamples     INTEGER NOT NULL,    -- paired-bootstrap resamples of the test queries
    alpha           DOUBLE NOT NULL,     -- CR²'s α in this study
    cell_key        VARCHAR NOT NULL,    -- the cell task's cache key
    cell_seconds    DOUBLE NOT NULL,
    meta            VARCHAR,             -- JSON: fit times, whether the gate was re-distilled
    created_at      TIMESTAMP NOT NULL,
    PRIMARY KEY (study_id, speed_factor, channel)
);

-- study premise: one row per study — the settings its id covers, so a page can name the command that
-- reproduces it (added after the first studies: a study run before has no row until `--record-only` records it)
CREATE TABLE IF NOT EXISTS premise_studies (
    study_id       VARCHAR PRIMARY KEY,
    label_source   VARCHAR NOT NULL,
    config         VARCHAR,              -- the config file as given to the command (NULL: configs/default.yaml)
    speeds         VARCHAR NOT NULL,     -- JSON list of device speed factors
    channels       VARCHAR NOT NULL,     -- JSON list of state distribution names, near → far
    n_resamples    INTEGER NOT NULL,
    seed           INTEGER NOT NULL,
    retrain_from   VARCHAR NOT NULL,     -- scratch | base
    retrain_epochs INTEGER,              -- fine-tuning epochs (retrain_from = base); NULL: the config's schedule
    base_run       VARCHAR NOT NULL,     -- the evaluation run the study varies
    created_at     TIMESTAMP NOT NULL    -- first recorded
);

-- tidy: per cell, method and comparison, a statistic with its 95 % paired-bootstrap interval
CREATE TABLE IF NOT EXISTS premise_results (
    study_id     VARCHAR NOT NULL,
    speed_factor DOUBLE NOT NULL,
    channel      VARCHAR NOT NULL,
    method       VARCHAR NOT NULL,       -- cr2-recal | cr2-retrain | a baseline | best-single
    reference    VARCHAR,                -- knn | best-single | cr2-retrain; NULL for a method's own metric
    metric       VARCHAR NOT NULL,       -- saving_pct | mean_saving_pct | risk_max | risk_mean | local_rate | …
    target       DOUBLE,                 -- accuracy target; NULL for a statistic over targets or λ
    estimate     DOUBLE,
    lower        DOUBLE,                 -- 95 % percentile interval (NULL: no interval computed)
    upper        DOUBLE,
    n_resamples  INTEGER NOT NULL,
    p_value      DOUBLE                  -- two-sided bootstrap p of the interval's own resamples (NULL: none)
);

-- cr2 study pools / cr2 study diagnostics: one row per (study, pool) — the pool, its run and where it ran
CREATE TABLE IF NOT EXISTS pool_runs (
    study_id     VARCHAR NOT NULL,        -- the sweep (or one warehouse's diagnostics)
    pool         VARCHAR NOT NULL,        -- the pool's id (its device model's id)
    label_source VARCHAR NOT NULL,
    models       VARCHAR NOT NULL,        -- JSON: pool order [{id, name, params, active_params, platform, role}]
    reference    VARCHAR NOT NULL,        -- m_ref (c_ref = 1)
    run_id       VARCHAR NOT NULL,        -- its evaluation run (in `home`)
    home         VARCHAR NOT NULL,        -- the warehouse it ran in, relative to this one's home ('.' = this one)
    n_test       INTEGER NOT NULL,
    n_evaluable  INTEGER NOT NULL,        -- test queries some model solves
    n_queries    INTEGER NOT NULL,        -- queries the label diagnostics read (every split)
    cost_ratio_realised DOUBLE,           -- E[c_0] / E[min edge c_m] on the test rows (< 1: device cheap)
    cost_ratio_est      DOUBLE,           -- the same under the pre-execution ĉ
    n_resamples  INTEGER NOT NULL,
    seconds      DOUBLE,                  -- wall time of the pool (pipeline + summary), this run
    created_at   TIMESTAMP NOT NULL,
    PRIMARY KEY (study_id, pool)
);

-- tidy: per pool, a comparison (subject vs other) or a label diagnostic, with its 95 % interval where one exists
CREATE TABLE IF NOT EXISTS pool_results (
    study_id  VARCHAR NOT NULL,
    pool      VARCHAR NOT NULL,
    subject   VARCHAR NOT NULL,           -- a method (cr2, mlp, …, full-information) or a model id
    other     VARCHAR,                    -- reference (knn | best-single) or the second model; NULL: none
    metric    VARCHAR NOT NULL,           -- saving_pct | mean_saving_pct | accuracy | phi | knn_auc_correct | …
    target    DOUBLE,                     -- accuracy target of a saving; NULL otherwise
    estimate  DOUBLE,
    lower     DOUBLE,                     -- 95 % paired-bootstrap interval over test queries (NULL: none)
    upper     DOUBLE,
    n         INTEGER,                    -- resamples of the interval, targets of a mean, or rows of a diagnostic
    n_resamples INTEGER,                  -- resamples the interval rests on (all of them for a saving); NULL: no
                                          -- interval, or stored before schema 7
    p_value   DOUBLE,                     -- two-sided bootstrap p of the interval's own resamples (NULL: none)
    family    VARCHAR,                    -- a test's family within the pool (cr2.evaluation.families); NULL: context
    family_size INTEGER,                  -- the tests of that family with a finite p
    p_holm    DOUBLE,                     -- Holm-adjusted p over the family
    verdict   VARCHAR                     -- the one word of the test (cheaper | dearer | no difference detected)
);

-- cr2 study level (cr2.studies.level): the A/A simulation of the equal-risk test's level — per family of one
-- evaluation run (question × rule × α at the default α, the page's Holm family), how often the label-permuted null
-- (two real sides exchanged per query by a fair coin, true saving 0) got a direction word, with its Monte-Carlo SE,
-- and the Monte-Carlo error of the page's bootstrap p (B = page_resamples) at the family's first Holm threshold
CREATE TABLE IF NOT EXISTS level_study (
    study_id          VARCHAR NOT NULL,  -- covers the run, replicates, resamples, seed and the study's code
    run_id            VARCHAR NOT NULL,  -- the evaluation run whose stored decisions the sides are
    question          VARCHAR NOT NULL,  -- gate-quality | calibrated-vs-default | certified-score
    rule              VARCHAR,           -- NULL for gate-quality
    alpha             DOUBLE,            -- the default α (NULL for gate-quality)
    n_tests           INTEGER NOT NULL,  -- m: the family's size (its Holm correction)
    n_replicates      INTEGER NOT NULL,  -- R: A/A replicates
    n_resamples       INTEGER NOT NULL,  -- B of each replicate's bootstrap
    n_rejections      INTEGER NOT NULL,  -- replicates where some test of the family said cheaper or dearer
    n_test_rejections INTEGER NOT NULL,  -- tests (of R × m) that did
    rate              DOUBLE NOT NULL,   -- n_rejections / R: the family-wise rejection rate under the null
    rate_se           DOUBLE NOT NULL,   -- its binomial Monte-Carlo SE
    rate_upper        DOUBLE NOT NULL,   -- its one-sided 95 % Clopper–Pearson upper bound
    p_above           DOUBLE NOT NULL,   -- exact one-sided binomial p of "rate ≤ 5 %"
    p_above_holm      DOUBLE NOT NULL,   -- Holm-adjusted over the study's families (read together)
    verdict           VARCHAR NOT NULL,  -- not detectably above | above the nominal 5 %, from p_above_holm (level_verdict)
    page_resamples    INTEGER NOT NULL,  -- B of the page's p (evaluation.bootstrap.n_resamples_compare)
    p_threshold       DOUBLE NOT NULL,   -- 0.05 / m: Holm's first threshold
    p_se              DOUBLE NOT NULL,   -- SE of the page's p at the threshold, √(p(2 − p)/B)
    p_relative_se     DOUBLE NOT NULL,   -- p_se / p_threshold
    p_tail_resamples  DOUBLE NOT NULL,   -- B · p_threshold / 2: resamples a decision there rests on
    seed              INTEGER NOT NULL,  -- the study's seed (coins and bootstrap indices)
    wall_s            DOUBLE NOT NULL,   -- seconds the simulation took
    created_at        TIMESTAMP NOT NULL
);

-- A verdict label renamed since rows were stored (cr2.studies.level.WITHIN: "within the nominal 5 %" read as a claim
-- of compliance; the rule, from p_above_holm, is unchanged): relabelled in place, idempotently, whenever a writable
-- open re-runs this file (its digest changed), so SQL shows the word every other surface prints.
UPDATE level_study SET verdict = 'not detectably above the nominal 5 %' WHERE verdict = 'within the nominal 5 %';
