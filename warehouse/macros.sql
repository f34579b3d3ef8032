-- SQL functions the views share; created before the views, each the twin of one Python function (tests compare them).

-- cr2.bootstrap.saving_verdict without a family: 'cheaper' where the whole 95 % interval of a saving (positive =
-- cheaper) is above 0, 'dearer' where below, else 'no difference detected'; NULL where the interval is undefined.
CREATE OR REPLACE MACRO saving_verdict(lower, upper) AS
    CASE WHEN lower IS NULL OR upper IS NULL OR NOT isfinite(lower) OR NOT isfinite(upper) THEN NULL
         WHEN lower > 0 THEN 'cheaper'
         WHEN upper < 0 THEN 'dearer'
         ELSE 'no difference detected' END;
