package hostile_test

import (
	"testing"

	"github.com/leasetool/lease/internal/hostile"
)

func TestMain(m *testing.M) { hostile.Main(m) }
