-- SQL functions the views share; created before the views, each the twin of one Python function (tests compare them).

-- cr2.evaluation.fixed_accuracy.VIEW_TARGETS: the target accuracies every fixed-accuracy saving is read at (0.50 … 0.99)
CREATE OR REPLACE MACRO target_grid() AS TABLE SELECT range / 100.0 AS target FROM range(50, 100);

-- cr2.evaluation.fixed_accuracy.PAPER_TARGETS: the paper's fixed-accuracy targets (§VII, Fig. dumbbell_cost_saving)
CREATE OR REPLACE MACRO paper_targets() AS TABLE SELECT unnest([0.79, 0.80, 0.81, 0.82]::DOUBLE[]) AS target;

-- cr2.evaluation.statistics.saving_verdict without a family: 'cheaper' where the whole 95 % interval of a saving (positive =
-- cheaper) is above 0, 'dearer' where below, else 'no difference detected'; NULL where the interval is undefined.
CREATE OR REPLACE MACRO saving_verdict(lower, upper) AS
    CASE WHEN lower IS NULL OR upper IS NULL OR NOT isfinite(lower) OR NOT isfinite(upper) THEN NULL
         WHEN lower > 0 THEN 'cheaper'
         WHEN upper < 0 THEN 'dearer'
         ELSE 'no difference detected' END;

-- cr2.evaluation.statistics.saving_verdict with a family: a direction also needs the family's Holm-adjusted p below
-- 0.05 (the tolerance of cr2.evaluation.statistics.significant); NULL where the interval or p is undefined. Used only
-- where a view must correct a family itself (a study's cells, stored one at a time); stored tests carry their word.
CREATE OR REPLACE MACRO saving_verdict_holm(lower, upper, p_holm) AS
    CASE WHEN saving_verdict(lower, upper) IS NULL OR p_holm IS NULL OR NOT isfinite(p_holm) THEN NULL
         WHEN saving_verdict(lower, upper) IN ('cheaper', 'dearer') AND p_holm < 0.05 - 1e-12 THEN saving_verdict(lower, upper)
         ELSE 'no difference detected' END;
