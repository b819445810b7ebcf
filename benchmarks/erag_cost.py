"""Runtime and peak memory of eRAG against end-to-end evaluation (the eRAG paper's Table 2): prints
`erag.cost`'s table (its docstring says what is measured and how); with ``--profile``, where the
time goes instead (`erag.cost.profile_table`).

    python benchmarks/erag_cost.py            # T5-small shape, 8 queries x 50 documents x 100 words
    python benchmarks/erag_cost.py --d-model 64 --layers 2 --queries 2 --docs 10   # quick look
    python benchmarks/erag_cost.py --profile --queries 4   # encoder/decoder split, batch sizes, padding, EOS
"""

import sys

from erag.cost import cost_table, parse_args, profile_table

if __name__ == "__main__":
    argv = sys.argv[1:]
    print(profile_table(argv) if parse_args(argv).profile else cost_table(argv))
