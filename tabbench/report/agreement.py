"""The one rule for "within 2 SE": whether two means (ours and a published or another folder's) agree.

Two means agree when their difference is at most ``BAND_SE`` combined standard errors,
``BAND_SE * sqrt(se_ours**2 + se_theirs**2)``: the standard error of the difference of two independent
means, so neither side's error bar is left out. Every report that judges agreement (the budget curves'
"vs paper", ``tabbench compare``) calls this; results/README.md states it.
"""

from __future__ import annotations

import math

#: How many combined standard errors a difference may be and still count as agreement.
BAND_SE = 2.0


def band(se_ours, se_theirs) -> float:
    """The largest difference that counts as agreement: BAND_SE x sqrt(se_ours^2 + se_theirs^2); NaN when
    either standard error is unknown (one run, or a number published without one): then nothing is judged."""
    if se_ours is None or se_theirs is None:
        return math.nan
    return BAND_SE * math.hypot(float(se_ours), float(se_theirs))


def within(difference, se_ours, se_theirs) -> bool | None:
    """Whether |difference| lies within the band; None where the band is unknown (see ``band``)."""
    allowed = band(se_ours, se_theirs)
    return None if math.isnan(allowed) else abs(difference) <= allowed

