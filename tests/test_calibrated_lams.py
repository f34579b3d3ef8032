"""λ = 0 is not calibrated, by one rule (cr2.crc.calibrated_lams) that the calibrate task, the gate-score cache and
CR2Router.calibrate share: λ > 0 get a calibrated threshold, λ = 0 the defer-everything row, a negative λ an error."""
from __future__ import annotations

import numpy as np
import pytest

from cr2.core.errors import InvalidValueError
from cr2.crc import calibrated_lams


def test_only_positive_lams_are_calibrated_in_the_given_order():
    np.testing.assert_array_equal(calibrated_lams([2.0, 0.0, 0.5]), [2.0, 0.5])
    assert calibrated_lams([0.0]).size == 0


@pytest.mark.parametrize("lams", [[-0.1, 1.0], [np.nan, 1.0]])
def test_a_negative_or_nan_lam_is_an_error_not_skipped(lams):
    with pytest.raises(InvalidValueError, match="λ must be ≥ 0"):
        calibrated_lams(lams)


def test_a_lam_asked_for_by_name_must_be_calibrated():
    np.testing.assert_array_equal(calibrated_lams([0.37], require_all=True), [0.37])
    with pytest.raises(InvalidValueError, match="λ = 0 is not calibrated"):
        calibrated_lams([0.0, 0.37], require_all=True)


def test_the_calibrate_task_refuses_an_extra_lam_of_zero():
    from cr2.config import load_config
    from cr2_tasks.calibrate import calibration_lams

    config = load_config(None)
    assert 0.37 in calibration_lams(config, (0.37,))
    with pytest.raises(InvalidValueError, match="λ = 0 is not calibrated"):
        calibration_lams(config, (0.0,))
