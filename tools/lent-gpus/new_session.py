"""Run a command in a new process session, detached from the `device` call that started it.

    python3 tools/lent-gpus/new_session.py CMD [ARG...] >> LOG 2>&1 < /dev/null &

A lent machine ends a command's processes when the command returns, except those in a session
of their own, which run on until the machine goes back; so a hold's long steps start here and
later commands only look at their files. Python instead of setsid(1), which a machine may lack.
"""

import os
import sys

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: new_session.py CMD [ARG...]")
    if os.getpgrp() == os.getpid() and os.fork():  # a group leader cannot start a session
        sys.exit(0)
    os.setsid()
    os.closerange(3, 4096)  # no pipe of the command that started it stays open in the session
    os.execvp(sys.argv[1], sys.argv[1:])
