"""Runtime and peak memory of eRAG against end-to-end evaluation (the eRAG paper's Table 2): prints
`erag.cost`'s table (its docstring says what is measured and how).

    python benchmarks/erag_cost.py            # T5-small shape, 8 queries x 50 documents x 100 words
    python benchmarks/erag_cost.py --d-model 64 --layers 2 --queries 2 --docs 10   # quick look
"""

import sys

from erag.cost import cost_table

if __name__ == "__main__":
    print(cost_table(sys.argv[1:]))
