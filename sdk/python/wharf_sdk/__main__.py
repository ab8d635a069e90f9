"""`python -m wharf_sdk build app.py -o app.wasm`."""

import sys

from .build import main

sys.exit(main())
