"""The former private name of `gsbpolicy.cli`, an alias of that very module (monkeypatching one patches
the other) for the importers outside gsbpolicy that have not moved to the public name yet."""

import sys

from . import cli

sys.modules[__name__] = cli
