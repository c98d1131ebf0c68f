// Worker
