from brain_operator.main import main

raise SystemExit(main())
