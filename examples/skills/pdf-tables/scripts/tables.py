# Placeholder table extraction for the example corpus.
import sys
print("tables", sys.argv[1:])
