# Placeholder OCR step for the example corpus.
import sys
print("ocr", sys.argv[1:])
