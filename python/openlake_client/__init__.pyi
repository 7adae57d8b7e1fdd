from ._native import (BUSY as BUSY, CHECKSUM_MISMATCH as CHECKSUM_MISMATCH, EXISTS as EXISTS,
                      NOSPACE as NOSPACE, NOT_FOUND as NOT_FOUND, OK as OK, PINNED as PINNED,
                      QUOTA as QUOTA, STALE_GENERATION as STALE_GENERATION,
                      TOO_LARGE as TOO_LARGE, Client as Client, Slot as Slot,
                      Placement as Placement, place_log2_q32 as place_log2_q32,
                      __version__ as __version__)
