-- Label diagnostics per pool: what the labels allow any router — the full-information reference's
-- mean saving vs KNN (headroom, with its interval), the device and m_ref accuracies, P(device right | m_ref wrong),
-- the φ correlation of device and m_ref correctness and the mean φ over all pairs, and how well a k-NN on the query
-- embeddings predicts correctness and disagreement (cross-validated AUC: device, m_ref, their disagreement, and the
-- mean over every model / pair). One row per (study, pool).
WITH d AS (SELECT * FROM pool_results),
runs AS (
    SELECT p.*, json_extract_string(p.models, '$[0].id') AS device FROM pool_runs p
)
SELECT r.study_id, r.pool, r.label_source, r.device, r.reference AS m_ref, r.cost_ratio_realised, r.cost_ratio_est,
       (SELECT estimate FROM d WHERE d.study_id = r.study_id AND d.pool = r.pool AND d.subject = 'full-information'
          AND d.other = 'knn' AND d.metric = 'mean_saving_pct') AS headroom_vs_knn_pct,
       (SELECT lower FROM d WHERE d.study_id = r.study_id AND d.pool = r.pool AND d.subject = 'full-information'
          AND d.other = 'knn' AND d.metric = 'mean_saving_pct') AS headroom_lower_pct,
       (SELECT upper FROM d WHERE d.study_id = r.study_id AND d.pool = r.pool AND d.subject = 'full-information'
          AND d.other = 'knn' AND d.metric = 'mean_saving_pct') AS headroom_upper_pct,
       (SELECT estimate FROM d WHERE d.study_id = r.study_id AND d.pool = r.pool AND d.metric = 'accuracy'
          AND d.subject = r.device) AS device_accuracy,
       (SELECT estimate FROM d WHERE d.study_id = r.study_id AND d.pool = r.pool AND d.metric = 'accuracy'
          AND d.subject = r.reference) AS ref_accuracy,
       (SELECT estimate FROM d WHERE d.study_id = r.study_id AND d.pool = r.pool
          AND d.metric = 'p_device_right_given_largest_wrong') AS p_device_right_given_ref_wrong,
       (SELECT estimate FROM d WHERE d.study_id = r.study_id AND d.pool = r.pool AND d.metric = 'phi'
          AND ((d.subject = r.device AND d.other = r.reference) OR (d.subject = r.reference AND d.other = r.device)))
          AS phi_device_ref,
       (SELECT avg(estimate) FROM d WHERE d.study_id = r.study_id AND d.pool = r.pool AND d.metric = 'phi') AS phi_mean,
       (SELECT estimate FROM d WHERE d.study_id = r.study_id AND d.pool = r.pool AND d.metric = 'knn_auc_correct'
          AND d.subject = r.device) AS auc_device_correct,
       (SELECT estimate FROM d WHERE d.study_id = r.study_id AND d.pool = r.pool AND d.metric = 'knn_auc_correct'
          AND d.subject = r.reference) AS auc_ref_correct,
       (SELECT avg(estimate) FROM d WHERE d.study_id = r.study_id AND d.pool = r.pool
          AND d.metric = 'knn_auc_correct') AS auc_correct_mean,
       (SELECT estimate FROM d WHERE d.study_id = r.study_id AND d.pool = r.pool AND d.metric = 'knn_auc_disagree'
          AND ((d.subject = r.device AND d.other = r.reference) OR (d.subject = r.reference AND d.other = r.device)))
          AS auc_disagree_device_ref,
       (SELECT avg(estimate) FROM d WHERE d.study_id = r.study_id AND d.pool = r.pool
          AND d.metric = 'knn_auc_disagree') AS auc_disagree_mean
FROM runs r
