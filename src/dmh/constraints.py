"""What a hyperparameter may be, for a method's ``_parameter_constraints`` (docs/extending.md).

A method declares, per parameter name, a list of constraints; :meth:`dmh.BaseHasher.fit` checks
every value against its list once, before it reads the data, and a value that no constraint of
its list accepts is a :class:`dmh.errors.ParameterError` of one line naming the method, the
parameter, what is allowed and what was given. ``None`` in a list allows the value ``None``::

    from dmh import BaseHasher
    from dmh.constraints import Interval, Options

    class MyHasher(BaseHasher):
        _parameter_constraints = {**BaseHasher._parameter_constraints,
                                  "reg": [Interval(numbers.Real, 0, None, closed="neither")],
                                  "init": [Options("pca", "random")], "tol": [None, Interval(numbers.Real, 0, 1)]}

Checks that involve several parameters (or the bit length) go in ``_check_param_combinations``.
"""

from ._validation import (
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    POSITIVE_INT,
    RANDOM_STATE,
    UNIT_INTERVAL,
    Boolean,
    Constraint,
    InstanceOf,
    Interval,
    IntSequence,
    Options,
    validate_params,
)

__all__ = ["NON_NEGATIVE", "NON_NEGATIVE_INT", "POSITIVE", "POSITIVE_INT", "RANDOM_STATE", "UNIT_INTERVAL", "Boolean",
           "Constraint", "InstanceOf", "IntSequence", "Interval", "Options", "validate_params"]
