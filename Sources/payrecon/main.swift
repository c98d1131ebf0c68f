print("payrecon")
