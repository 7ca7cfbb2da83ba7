print("cardbench")
