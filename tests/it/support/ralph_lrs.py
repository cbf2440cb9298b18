"""Ralph's LRS (PyPI ralph-malph) for the xAPI tests, on a port and folder of the test's.

Ralph's file-system backend, the one backend that needs no database server, writes its file in
"create" mode, so it takes one POST and answers 500 to every later one. The tests run it in
"append" mode, as it would need to be to serve as an LRS: everything else (the API, the
statement validation, the 204 to an identical resend and the 409 to a different one with the
same id, authentication) is Ralph's own.

Usage: python ralph_lrs.py PORT   (environment: RALPH_APP_DIR, RALPH_RUNSERVER_BACKEND=fs,
RALPH_BACKENDS__LRS__FS__DEFAULT_DIRECTORY_PATH)
"""

import sys

import uvicorn
from ralph.backends.data.base import BaseOperationType
from ralph.backends.data.fs import FSDataBackend

FSDataBackend.default_operation_type = BaseOperationType.APPEND

uvicorn.run("ralph.api:app", host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
