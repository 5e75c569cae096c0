"""(placeholder: filled in by the tuples work of issue 4)"""
