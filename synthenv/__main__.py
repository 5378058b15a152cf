"""``python -m synthenv`` runs the command line (and is what ``torchrun -m synthenv`` starts on every rank)."""

import os
import sys

from synthenv.cli import main

if "TORCHELASTIC_RUN_ID" in os.environ:  # under torchrun: a crash's traceback goes into torchrun's summary
    from torch.distributed.elastic.multiprocessing.errors import record

    main = record(main)

sys.exit(main())
