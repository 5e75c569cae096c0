"""(placeholder: filled in by the sorting work of issue 4)"""
