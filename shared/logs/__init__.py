"""Log lines: JSON or text (`SIGNOFF_LOG_FORMAT`), the conversation and turn they are about
(`context.py`), and never a secret (`redact.py`); `setup.py` applies them to a process.
"""

from shared.logs.context import log_context
from shared.logs.redact import Redactor
from shared.logs.setup import adopt, configure

__all__ = ["Redactor", "adopt", "configure", "log_context"]
